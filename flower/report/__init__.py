"""Reading a finished or running run back: the analysis, the terminal and HTML renderings, the preview of
the next resume, and the readers of run data and transcript entries.

Modules: `analysis` (the context economics, a pure function over entries), `entries` (field readers that
never trust a type), `rundata` (a run dir or store on disk), `preview` (what the next resume feeds back),
`terminal` and `html` (renderings), `text` (sanitizing and short number forms for a terminal).
Nothing here is imported at `import flower`; the package imports no module of `flower.cli`.
"""
