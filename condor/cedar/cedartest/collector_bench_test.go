package cedartest_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/cedar/cedartest"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/wire"
)

// slotAd is a partitionable slot's ad of about the size a startd sends.
func slotAd(machine string, slot int) wire.Ad {
	ad := wire.Ad{
		"MyType": `"Machine"`, "Name": fmt.Sprintf(`"slot%d@%s"`, slot, machine), "Machine": fmt.Sprintf("%q", machine),
		"State": `"Unclaimed"`, "Activity": `"Idle"`, "Cpus": "1", "Memory": "2048", "Disk": "10000000",
		"OpSys": `"LINUX"`, "Arch": `"X86_64"`, "Requirements": "START", "Start": "true", "Rank": "0",
		"SlotType": `"Static"`, "SlotID": fmt.Sprint(slot), "TotalCpus": "16", "TotalMemory": "32768",
		"LoadAvg": "0.25", "KeyboardIdle": "3600", "CondorVersion": `"$CondorVersion: 25.0.0 2025-01-01 $"`,
		"StartdIpAddr": `"<10.0.0.1:9618?addrs=10.0.0.1-9618>"`, "MyAddress": `"<10.0.0.1:9618>"`,
		"UidDomain": `"example.org"`, "FileSystemDomain": `"example.org"`, "HasFileTransfer": "true",
	}
	for i := range 25 {
		ad[fmt.Sprintf("Attr%02d", i)] = fmt.Sprintf(`"value of attribute %d of slot %d"`, i, slot)
	}
	return ad
}

// BenchmarkCEDARQueryStartdAds is HTCondor's QUERY_STARTD_ADS for every ad
// of a pool of 10,000 slots, over a real loopback socket with FS and
// AES-GCM, as condor_status and htcondor2.Collector.query send it. The
// target is under 0.5 s per query.
func BenchmarkCEDARQueryStartdAds(b *testing.B) {
	const machines, slots = 625, 16
	c := collector.New(collector.Options{})
	ctx := context.Background()
	for m := range machines {
		name := fmt.Sprintf("node%04d.example.org", m)
		req := &wire.UpdateRequest{Type: wire.TypeMachine, Source: name}
		for s := range slots {
			req.Ads = append(req.Ads, slotAd(name, s+1))
		}
		if _, err := c.Update(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	srv := cedar.NewServer(cedar.Options{
		Methods: []cedar.Method{&cedar.FS{Domain: "test", Grant: func(uint32, string) *auth.Claims {
			return &auth.Claims{Scopes: []auth.Scope{auth.Read}}
		}}},
		Commands: collector.CedarCommands(collector.CedarOptions{Current: func() *collector.Collector { return c }}),
		Timeout:  time.Minute,
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(ctx, conn, nil)
		}
	}()
	cpu0 := cedartest.CPUTime()
	for b.Loop() {
		st, _, err := cedartest.Dial(ctx, l.Addr().String(), 5)
		if err != nil {
			b.Fatal(err)
		}
		q := classad.NewAd()
		q.SetBool("Requirements", true)
		if err := st.PutAd(q, nil); err != nil {
			b.Fatal(err)
		}
		if err := st.EndMessage(); err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			more, err := st.GetInt()
			if err != nil {
				b.Fatal(err)
			}
			if more == 0 {
				break
			}
			if _, err := st.GetAd(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		st.Conn().Close()
		if n != machines*slots {
			b.Fatalf("%d ads, want %d", n, machines*slots)
		}
	}
	b.ReportMetric((cedartest.CPUTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}
