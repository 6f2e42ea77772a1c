"""What the model reads: each tool's reply as one small dict, which is the structured result, and
the same dict as text lines (docs/tools.md, "What the model reads"); a module per reply, `schema`
its keys in order, `render` the result, `budget` how much output fits.
"""
