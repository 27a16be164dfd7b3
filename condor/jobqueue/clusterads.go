package jobqueue

import (
	"maps"
	"strings"
	"sync"
)

// clusterAdsMax bounds the cluster ads a queue keeps: the clusters whose
// jobs are starting and ending now, a few at a time.
const clusterAdsMax = 64

// clusterAds are cluster ads as stored, kept so that reading one job (as
// each starts and as it moves to the history) does not read and index its
// cluster's attributes again: for a cluster of many jobs, most of a job's
// ad.
//
// A transaction that writes a cluster's attributes drops its ad (changed)
// and, until it has committed or rolled back (settled), no ad is used or
// kept: its own reads see its writes, not what is kept. An ad read outside
// it is kept only when no such transaction ran meanwhile (the generation,
// taken before the read, is still the same), so that what is kept is always
// what was committed last.
type clusterAds struct {
	mu sync.Mutex
	// gen counts the transactions that wrote cluster attributes.
	gen uint64
	// dirty is set while such a transaction runs.
	dirty bool
	m     map[int]*clusterAd
}

// clusterAd is one cluster's ad.
type clusterAd struct {
	// ad holds the attributes as stored, lowers each lower-case name
	// with its spelling in ad; neither changes once kept.
	ad     Ad
	lowers map[string]string
}

// newClusterAd indexes the attributes of a cluster, in their order.
func newClusterAd(attrs [][2]string) *clusterAd {
	c := &clusterAd{ad: make(Ad, len(attrs)), lowers: make(map[string]string, len(attrs))}
	for _, kv := range attrs {
		c.ad[kv[0]] = kv[1]
		c.lowers[strings.ToLower(kv[0])] = kv[0]
	}
	return c
}

// fill gives a job's ad and its names' index copies of c's.
func (c *clusterAd) fill(j *Job, lowers *map[string]string) {
	j.Ad = maps.Clone(c.ad)
	*lowers = maps.Clone(c.lowers)
}

// get returns cluster's kept ad, nil when none is or none may be used, and
// the generation a read made now must still find for its ad to be kept.
func (c *clusterAds) get(cluster int) (*clusterAd, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty {
		return nil, c.gen
	}
	return c.m[cluster], c.gen
}

// put keeps ad as cluster's, read from the queue after get returned gen:
// only if no transaction wrote cluster attributes since or writes them now.
func (c *clusterAds) put(cluster int, gen uint64, ad *clusterAd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty || gen != c.gen {
		return
	}
	if c.m == nil {
		c.m = make(map[int]*clusterAd)
	}
	if len(c.m) >= clusterAdsMax {
		for k := range c.m {
			delete(c.m, k)
			if len(c.m) < clusterAdsMax-clusterAdsMax/4 {
				break
			}
		}
	}
	c.m[cluster] = ad
}

// changed drops cluster's ad, which the running transaction wrote, and
// keeps any from being used or kept until it settles.
func (c *clusterAds) changed(cluster int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, cluster)
	c.dirty = true
	c.gen++
}

// settled is called as every write transaction ends, committed or not.
func (c *clusterAds) settled() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty {
		c.dirty = false
		c.gen++
	}
}
