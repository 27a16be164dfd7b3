package sim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/pond-htc/pond/overlay/flock"
)

// FlockMode is how a simulated pool orders the pools it flocks to.
type FlockMode string

// Flock modes.
const (
	// FlockNone never flocks: every pool runs its own jobs only.
	FlockNone FlockMode = "none"
	// FlockNearest flocks to the willing pools nearest first, as pond
	// does (flock.Willing).
	FlockNearest FlockMode = "nearest"
	// FlockRandom flocks to the willing pools in a random order: the
	// same policy without proximity.
	FlockRandom FlockMode = "random"
)

// FlockConfig describes a simulated sea of pools flocking to each other.
type FlockConfig struct {
	Pools int
	// Overloaded is the fraction of pools whose jobs arrive faster than
	// their slots run them (load 1.5); the others run at load 0.4.
	Overloaded float64
	// Runtime is the mean job runtime (exponential); Duration how long
	// the simulation runs; Step its time step, the announcement interval.
	Runtime, Duration, Step time.Duration
	// IdleTime is FLOCK_IDLE_TIME: a job idle that long may flock, and
	// the next pool is added after it too (FLOCK_INCREMENT 1).
	IdleTime time.Duration
	Mode     FlockMode
	Seed     uint64
}

// FlockReport is what a flock simulation measured.
type FlockReport struct {
	Mode      FlockMode
	Pools     int
	Jobs      int           // jobs started
	Flocked   int           // of those, started in another pool
	MeanWait  time.Duration // from arrival to start
	P95Wait   time.Duration
	MeanRTT   time.Duration // between a flocked job's pool and where it ran
	Unstarted int           // jobs still idle at the end
}

type simPool struct {
	slots, busy int
	lambda      float64         // arrivals per second
	idle        []time.Duration // arrival times of idle jobs, oldest first
	ends        []time.Duration // end times of running jobs
	x, y        float64         // position: RTT grows with distance
	order       []int           // the willing pools, in this pool's order
	flocked     int             // how many of order it flocks to
	lastAdd     time.Duration   // when it last added a pool
	announced   int             // idle slots at the last announcement
	rtts        map[int]float64 // RTT in seconds to the pools in order
}

// rtt is the simulated round trip between two pools: 50 ms plus up to
// 250 ms across the unit square, as the tree simulations' edges.
func rtt(a, b *simPool) float64 {
	d := math.Hypot(a.x-b.x, a.y-b.y) / math.Sqrt2
	return 0.050 + 0.250*d
}

// Flock simulates cfg.Pools pools flocking under cfg.Mode. Every pool
// announces its idle slots each step; a pool whose jobs waited IdleTime
// adds the next willing pool in its order (nearest first with
// FlockNearest, ranked by flock.Willing over the announcements with RTTs
// from the pools' positions), and its waiting jobs take the idle slots of
// the pools it flocks to, after their own jobs. Each job starts once.
func Flock(cfg FlockConfig) (*FlockReport, error) {
	if cfg.Pools < 2 || cfg.Step <= 0 || cfg.Duration < cfg.Step || cfg.Runtime <= 0 {
		return nil, fmt.Errorf("sim: flock: want 2 pools or more and positive durations")
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x666c6f636b))
	pools := make([]*simPool, cfg.Pools)
	for i := range pools {
		p := &simPool{slots: 4 + rng.IntN(13), x: rng.Float64(), y: rng.Float64()}
		load := 0.4
		if rng.Float64() < cfg.Overloaded {
			load = 1.5
		}
		p.lambda = load * float64(p.slots) / cfg.Runtime.Seconds()
		p.announced = p.slots
		pools[i] = p
	}
	if cfg.Mode != FlockNone {
		// The ranking: flock.Willing over every pool's announcement,
		// computed once (positions do not move); each step filters it
		// by the announced idle slots.
		anns := make([]flock.Announcement, len(pools))
		for i, p := range pools {
			anns[i] = flock.Announcement{Pool: strconv.Itoa(i), Node: strconv.Itoa(i), FlockCapacity: flock.Capacity{IdleSlots: p.slots}}
		}
		any, err := flock.Compile(flock.Config{Name: "any", Out: &flock.Out{}})
		if err != nil {
			return nil, err
		}
		for i, p := range pools {
			w := flock.Willing(strconv.Itoa(i), anns, []*flock.Policy{any}, func(node string) (time.Duration, bool) {
				j, _ := strconv.Atoi(node)
				return time.Duration(rtt(p, pools[j]) * float64(time.Second)), true
			})
			p.rtts = map[int]float64{}
			for _, c := range w {
				j, _ := strconv.Atoi(c.Pool)
				p.order = append(p.order, j)
				p.rtts[j] = c.RTT.Seconds()
			}
			if cfg.Mode == FlockRandom {
				rng.Shuffle(len(p.order), func(a, b int) { p.order[a], p.order[b] = p.order[b], p.order[a] })
			}
		}
	}
	var waits []float64
	var rttSum float64
	rep := &FlockReport{Mode: cfg.Mode, Pools: cfg.Pools}
	start := func(p *simPool, arrived, now time.Duration) {
		p.busy++
		run := time.Duration(rng.ExpFloat64() * float64(cfg.Runtime))
		p.ends = append(p.ends, now+run)
		waits = append(waits, (now - arrived).Seconds())
		rep.Jobs++
	}
	for now := time.Duration(0); now < cfg.Duration; now += cfg.Step {
		for _, p := range pools {
			// Jobs that ended leave their slots; new ones arrive.
			kept := p.ends[:0]
			for _, e := range p.ends {
				if e > now {
					kept = append(kept, e)
				} else {
					p.busy--
				}
			}
			p.ends = kept
			n := poisson(rng, p.lambda*cfg.Step.Seconds())
			for k := 0; k < n; k++ {
				p.idle = append(p.idle, now-time.Duration(rng.Float64()*float64(cfg.Step)))
			}
			// The pool's own jobs first.
			for len(p.idle) > 0 && p.busy < p.slots {
				start(p, p.idle[0], now)
				p.idle = p.idle[1:]
			}
		}
		if cfg.Mode != FlockNone {
			for _, p := range pools {
				waiting := 0
				for _, a := range p.idle {
					if now-a >= cfg.IdleTime {
						waiting++
					}
				}
				if waiting == 0 {
					p.flocked = 0
					continue
				}
				if p.flocked < len(p.order) && (p.flocked == 0 || now-p.lastAdd >= cfg.IdleTime) {
					p.flocked++
					p.lastAdd = now
				}
				// The pools it flocks to, nearest (or first) first; a pool
				// announced without an idle slot is skipped.
				for _, j := range p.order[:p.flocked] {
					q := pools[j]
					if q.announced == 0 {
						continue
					}
					for len(p.idle) > 0 && now-p.idle[0] >= cfg.IdleTime && q.busy < q.slots {
						start(q, p.idle[0], now)
						p.idle = p.idle[1:]
						rep.Flocked++
						rttSum += p.rtts[j]
					}
				}
			}
		}
		for _, p := range pools {
			p.announced = p.slots - p.busy
		}
	}
	for _, p := range pools {
		rep.Unstarted += len(p.idle)
	}
	if len(waits) > 0 {
		sort.Float64s(waits)
		sum := 0.0
		for _, w := range waits {
			sum += w
		}
		rep.MeanWait = time.Duration(sum / float64(len(waits)) * float64(time.Second))
		rep.P95Wait = time.Duration(waits[len(waits)*95/100] * float64(time.Second))
	}
	if rep.Flocked > 0 {
		rep.MeanRTT = time.Duration(rttSum / float64(rep.Flocked) * float64(time.Second))
	}
	return rep, nil
}

// poisson draws from a Poisson distribution of mean m (Knuth's method,
// for the small means of one step).
func poisson(rng *rand.Rand, m float64) int {
	l, k, p := math.Exp(-m), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// WriteFlockCSV writes flock reports as CSV.
func WriteFlockCSV(w io.Writer, reps []*FlockReport) error {
	if _, err := fmt.Fprintln(w, "mode,pools,jobs,flocked,mean_wait_s,p95_wait_s,mean_flock_rtt_ms,unstarted"); err != nil {
		return err
	}
	for _, r := range reps {
		if _, err := fmt.Fprintf(w, "%s,%d,%d,%d,%.1f,%.1f,%.1f,%d\n", r.Mode, r.Pools, r.Jobs, r.Flocked,
			r.MeanWait.Seconds(), r.P95Wait.Seconds(), float64(r.MeanRTT.Microseconds())/1000, r.Unstarted); err != nil {
			return err
		}
	}
	return nil
}
