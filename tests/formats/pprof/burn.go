// burn: the program whose CPU profile is the pprof golden input (go run burn.go cpu.pprof).
// Two functions burn CPU in a known ratio (hot: 3 parts, warm: 1 part) under main, one of
// them under a pprof label, so the profile has stacks, two sample types and labels.
package main

import (
	"context"
	"os"
	"runtime/pprof"
	"time"
)

var sink uint64

func spin(d time.Duration) {
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink += x
}

//go:noinline
func hot() { spin(600 * time.Millisecond) }

//go:noinline
func warm() { spin(200 * time.Millisecond) }

func main() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	hot()
	pprof.Do(context.Background(), pprof.Labels("phase", "warm"), func(context.Context) { warm() })
	pprof.StopCPUProfile()
	f.Close()
}
