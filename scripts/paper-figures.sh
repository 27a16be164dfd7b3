#!/usr/bin/env bash
# Writes the papers' figures in docs/sim again: the CSV files, then every
# chart drawn from them (SVG). About half a minute; docs/performance.md,
# "The papers' figures", says what each shows. tree.csv, which the PonD
# figure reads, is the tree sweep's (hours: go test ./overlay/sim -run
# TestFigures -sim.figures) and is not simulated again here.
set -euo pipefail
cd "$(dirname "$0")/.."
# flock.csv and paper_flock_fig6.csv: 1,000 pools flocking for 6 simulated hours.
go test -count=1 ./overlay/sim -run 'TestFlockFigures$' -sim.flock -v
# paper_pond_fig6.csv and paper_condorj2_*.csv from the models, tree.csv and
# the measured figures; then every chart of docs/sim, and the crossovers.
go test -count=1 ./overlay/sim -run 'TestPaperFigures$' -sim.papers -v
# paper_panda_factory_*.csv: a scaled day of jobs on a real Slurm cluster
# (root, about thirteen minutes), only with POND_FACTORY_FIGURES=60 (the
# seconds of a scaled hour); then every chart again.
if [ -n "${POND_FACTORY_FIGURES:-}" ]; then
  go build -o bin/pondctl ./cmd/pondctl
  POND_BIN=$PWD/bin/pondctl go test -count=1 -run 'TestFactoryDayFigures$' -timeout 60m -v ./acceptance/
  go test -count=1 ./overlay/sim -run 'TestPlots$' -sim.plots
fi
git status --short docs/sim
