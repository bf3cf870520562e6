"""A read-only web viewer over one run folder (`autoenvscaling view RUN_DIR`).

Pages: the run's overview (rounds so far, the one in progress, manifest, policy lineage,
warnings), curves per round, candidates with their verdicts and revision diffs, rollouts as
conversations, trials. Everything is read from the run folder as the run writes it: the viewer
never writes there (SQLite stores are opened read-only).

Every byte a model wrote (task names, file names, outputs) is hostile: pages are Jinja2
templates with autoescape on, no template marks anything `safe`, and the Content-Security-Policy
allows only the viewer's own script and style files.
"""
