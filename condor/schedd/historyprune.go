package schedd

import (
	"context"
	"fmt"
	"time"

	"github.com/pond-htc/pond/condor/config"
)

// HTCondor's bounds of the history, in bytes of its ads: a file of at
// most MAX_HISTORY_LOG and MAX_HISTORY_ROTATIONS rotated ones.
const (
	defaultMaxHistoryLog       = 20 << 20
	defaultMaxHistoryRotations = 2
)

// How often the schedd prunes its history: when historyPruneMoves jobs
// (fewer for a small bound: see pruneAfterMoves) have left the queue
// since it last did, or, if any has, after historyPruneEvery.
const (
	historyPruneCheck = 10 * time.Second
	historyPruneEvery = 5 * time.Minute
	historyPruneMoves = 10000
	// minHistoryAdBytes is about the smallest a finished job's ad is in
	// the history, so that a bound of B bytes holds at most
	// B/minHistoryAdBytes jobs.
	minHistoryAdBytes = 500
)

// pruneAfterMoves is how many jobs leave the queue between two prunings
// of a history bounded to bound bytes: historyPruneMoves, or, for a bound
// that holds fewer than twice that many jobs, half of what it holds, so
// that the history stays within about 1.5 times its bound.
func pruneAfterMoves(bound int64) int64 {
	return max(1, min(historyPruneMoves, bound/minHistoryAdBytes/2))
}

// loadHistoryBound reads the bytes of ads the history keeps (0: no bound)
// from cfg, as HTCondor bounds its history files.
func loadHistoryBound(cfg *config.Config) (int64, error) {
	rotate, err := cfg.Bool("ENABLE_HISTORY_ROTATION", true)
	if err != nil {
		return 0, fmt.Errorf("ENABLE_HISTORY_ROTATION: %w", err)
	}
	size, err := cfg.Int("MAX_HISTORY_LOG", defaultMaxHistoryLog)
	if err != nil {
		return 0, fmt.Errorf("MAX_HISTORY_LOG: %w", err)
	}
	if size < 0 {
		return 0, fmt.Errorf("MAX_HISTORY_LOG = %d: want 0 or more bytes", size)
	}
	rotations, err := cfg.Int("MAX_HISTORY_ROTATIONS", defaultMaxHistoryRotations)
	if err != nil {
		return 0, fmt.Errorf("MAX_HISTORY_ROTATIONS: %w", err)
	}
	if rotations < 0 {
		return 0, fmt.Errorf("MAX_HISTORY_ROTATIONS = %d: want 0 or more", rotations)
	}
	if !rotate {
		return 0, nil
	}
	return int64(size) * int64(1+rotations), nil
}

// historyLoop keeps the history within its bound (limits.historyBytes):
// after pruneAfterMoves jobs have left the queue, or historyPruneEvery
// after any has, it deletes the least recently finished beyond it. Else
// the history, which every finished job joins, would grow without end.
func (s *Schedd) historyLoop(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(historyPruneCheck)
	defer t.Stop()
	pruned, last := int64(-1), time.Time{}
	for {
		moves, err := s.q.HistoryMoves(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("reading the history's size", "err", err)
		}
		bound := s.lim.Load().historyBytes
		due := moves != pruned && (pruned < 0 || moves-pruned >= pruneAfterMoves(bound) || time.Since(last) >= historyPruneEvery)
		if err == nil && bound > 0 && due {
			start := time.Now()
			n, err := s.q.PruneHistoryBytes(ctx, bound)
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case err != nil:
				s.log.Warn("pruning the history", "err", err, "deleted", n)
			default:
				pruned, last = moves, time.Now()
				if n > 0 {
					s.log.Info("pruned the history to MAX_HISTORY_LOG x (1 + MAX_HISTORY_ROTATIONS)", "jobs", n, "bytes", bound, "took", time.Since(start).Round(time.Millisecond))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
