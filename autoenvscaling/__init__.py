"""autoenvscaling: the card's top-level folders as one importable package.

Each subpackage here is a relative symlink to a folder at the repository root
(`autoenvscaling/graphs -> ../graphs`), so the code lives where the card puts it while every
static tool (type checker, IDE, code map) resolves `autoenvscaling.<folder>` by plain path
lookup. setuptools follows the links for wheels and editable installs alike.
"""
