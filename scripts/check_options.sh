#!/bin/sh
# scripts/check_options.sh - options are read once (issue 16, core/config.h):
# only core/options.c (the table) and core/config.c (tg_config_read) look an
# option up by its name; everything else reads the tg_config a program
# carries, or asks the public API (tg_options_summarize, tg_session_*).
# Fails (exit 1) naming file:line of any other tg_options_get_* call under
# src/ or tools/. A new option gets a field in tg_config, read in config.c.
# usage: scripts/check_options.sh [SOURCE_DIR]
cd "${1:-$(dirname "$0")/..}" || exit 2
out=$(grep -rnE 'tg_options_get_(int|float|string)[[:space:]]*\(' src tools --include='*.c' \
          --include='*.h' | grep -vE '^src/core/(options|config)\.c:')
if [ -n "$out" ]; then
    echo "$out" | sed -E 's/^([^:]+:[0-9]+):.*/\1: an option looked up by name outside core\/config.c; read it into tg_config (core\/config.h) and use the field/'
    echo "check_options: $(echo "$out" | wc -l) look-ups outside core/config.c"
    exit 1
fi
echo "check_options: options are looked up only in core/options.c and core/config.c"
