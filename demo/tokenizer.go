package demo

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kvlens/kvlens/router"
)

// setTokenizer gives the router the tokenizer cfg names, and prints one
// line saying which and why.
func (d *Demo) setTokenizer(cfg Config, pool *router.Pool) error {
	out := cfg.Stdout
	if out == nil {
		out = os.Stdout
	}
	logf := func(format string, args ...any) { fmt.Fprintf(out, "kvlens: "+format+"\n", args...) }
	worker := &router.WorkerTokenize{Pool: pool, Client: d.Proxy.Client(), Logf: logf}
	switch cfg.Tokenizer {
	case "embedded":
		fmt.Fprintln(out, "kvlens: tokenizer embedded (cl100k, kvlens template), as --tokenizer says")
	case "worker":
		fmt.Fprintln(out, "kvlens: tokenizer worker (each worker's /tokenize), as --tokenizer says")
		d.Proxy.SetTokenizer(worker)
	case "", "auto":
		if d.fleet != nil {
			// The simulated workers share the embedded tokenizer.
			fmt.Fprintln(out, "kvlens: tokenizer auto: embedded (cl100k, kvlens template): the workers are kvlens's simulated fleet")
			return nil
		}
		auto := &router.Auto{Worker: worker, Model: cfg.Model, Files: cfg.AutoFiles, Logf: logf}
		auto.OnSwitch = func(line string) {
			fmt.Fprintln(out, "kvlens: "+line)
			// What the index predicted with the old tokens says nothing of
			// the new ones.
			d.Proxy.Router().ClearBlind()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fmt.Fprintln(out, "kvlens: "+auto.Choose(ctx, pool))
		cancel()
		auto.Watch(pool, 5*time.Second)
		d.Proxy.SetTokenizer(auto)
	case "files":
		files := cfg.TokenizerFiles
		fmt.Fprintf(out, "kvlens: tokenizer files: the model's tokenizer.json and chat template (%s) in %s, as --tokenizer says\n", files.Template, files)
		d.Proxy.SetTokenizer(router.Files{Engine: files})
	default:
		return fmt.Errorf("--tokenizer %q: want auto, embedded, worker or the path of the model's tokenizer files", cfg.Tokenizer)
	}
	return nil
}
