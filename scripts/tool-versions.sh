# The checkers' pinned versions, sourced by scripts/check and scripts/typecheck-scenarios.sh,
# so both install the same mypy (and a bump is one edit).
RUFF_VERSION=0.17.6
MYPY_VERSION=2.4.1
