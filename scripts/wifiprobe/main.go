// Command wifiprobe times how long the dashboard takes to show live figures
// in Chromium over a slow network, as a phone on booth Wi-Fi would load it:
// a fresh browser (nothing cached), then a reload (what it cached).
//
//	go run ./scripts/wifiprobe -url http://127.0.0.1:8080 -kbps 1000 -rtt 300ms -runs 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the dashboard")
	kbps := flag.Float64("kbps", 1000, "download and upload throughput, kbit/s")
	rtt := flag.Duration("rtt", 300*time.Millisecond, "latency added to each request")
	runs := flag.Int("runs", 3, "fresh browsers, each loading the page and reloading it")
	flag.Parse()
	for i := range *runs {
		cold, warm, err := run(*url, *kbps*1000/8, *rtt)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("run %d: live figures %.1f s after opening, %.1f s after reloading\n", i+1, cold.Seconds(), warm.Seconds())
	}
}

// run opens url in a fresh browser over the throttled network and returns
// how long the page took to draw its first live frame, then the same after
// a reload.
func run(url string, bytesPerSec float64, rtt time.Duration) (cold, warm time.Duration, err error) {
	dir, err := os.MkdirTemp("", "wifiprobe")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath("/usr/bin/chromium"), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(dir), chromedp.WindowSize(390, 844),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		return 0, 0, err
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		return 0, 0, err
	}
	slow := []*network.Conditions{{Latency: float64(rtt.Milliseconds()), DownloadThroughput: bytesPerSec, UploadThroughput: bytesPerSec}}
	if _, err := chromedp.Call(ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{MatchedNetworkConditions: slow}); err != nil {
		return 0, 0, err
	}
	live := func(load chromedp.Action[chromedp.Void]) (time.Duration, error) {
		start := time.Now()
		if err := chromedp.Do(ctx, load); err != nil {
			return 0, err
		}
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById('ttft-chart') && !!document.getElementById('ttft-chart').dataset.lastT`))
			if err == nil && ok {
				return time.Since(start), nil
			}
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if cold, err = live(chromedp.Navigate(url)); err != nil {
		return 0, 0, err
	}
	warm, err = live(chromedp.Reload())
	return cold, warm, err
}
