#!/usr/bin/env bash
# bench/scale.sh: kept for old instructions; the scale measurement is part of
# bench/run.sh now (same driver as every other figure):
#   bash bench/run.sh --scale
exec bash "$(dirname "$0")/run.sh" --scale "$@"
