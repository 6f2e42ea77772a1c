"""What a model reads: every tool's reply as one small dict, and that dict as text.

Claude Code (and VS Code) give their model `JSON.stringify(structuredContent)` and drop
the text blocks, other clients show the text. So the structured result *is* the reading
written for the model, and the text block is the same dict rendered as lines: one reading
whatever the client shows (docs/tools.md, "What the model reads"). The rules, for every reply:

- the first key is `verdict`, one line: `done, exit 3 after 1.2s`, `task started: id=...`;
- no key whose value is null, empty or the default: absent means "nothing to say";
- output is an excerpt cut on line boundaries, whose cut marker says how many bytes and
  lines were left out and the `logs` call that reads them;
- a task that still runs gets one `next` step.

One module per reply: `task` (run and status), `listing` (list), `page` (logs: a page or a
search), `control` (kill and write); `schema` declares each reply's keys, in the order the reply
gives them, with what the output schema tells a client; `render` makes the dict a tool result;
`budget` decides how much of a stream's bytes (read by the core) fits a reply's JSON characters.
A fact a program needs is a key (run and status: `status`, `exit_code`, `signal`); the verdict
says it in words for the model, and nothing parses a verdict back.
Each reply is built from the core's own types (the task's record, an output excerpt, a page,
a search result) and what the tool learned from the task manager; hive_bash.mcp.tools calls
the `*_reply` functions and nothing else of what the model reads.
"""
