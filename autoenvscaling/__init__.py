"""autoenvscaling: the card's top-level folders as one importable package.

The subpackages live at the repository root (`graphs/`, `tools/`, `mcp_servers/`, `training/`,
`prompts/`, `cli/`, `viewer/`); pyproject's `package-dir` maps each onto `autoenvscaling.<folder>`
for wheels and editable installs. Inside the package, imports of the package are relative, so a
tool that resolves imports by path reads the same graph Python does.
"""
