package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/kvlens/kvlens/recording"
)

const recordingsUsage = `Usage: kvlens recordings <command> [flags] [arguments]

Commands:
  list                 list the recorded sessions
  export ID            write a session as CSV (--format csv) or JSON (--format json)
  delete ID            remove a session (not one a running kvlens still records, unless --force)

Every command takes --db PATH (default: %s).
`

func recordingsCmd(args []string) int {
	return storeCmd("recordings", recordingsUsage, map[string]storeSub{
		"list": recordingsList, "export": recordingsExport, "delete": recordingsDelete,
	}, args)
}

func recordingsList(ctx context.Context, fs *flag.FlagSet, dbPath *string, args []string, out io.Writer) error {
	if _, err := parse(fs, args, 0, ""); err != nil {
		return err
	}
	db, err := openDB(ctx, *dbPath, false)
	if err != nil {
		return err
	}
	defer db.Close()
	recs, err := db.Recordings(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTARTED\tLENGTH\tFRAMES\tSIZE")
	for _, r := range recs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%.1f KB\n", r.ID, r.Name, r.Started.Local().Format("2006-01-02 15:04:05"), recording.Length(r, false, time.Now()), r.Frames, float64(r.Bytes)/1000)
	}
	return tw.Flush()
}

// recordingID reads the ID argument.
func recordingID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usagef("recording ID %q is not a positive whole number (see kvlens recordings list)", s)
	}
	return id, nil
}

func recordingsExport(ctx context.Context, fs *flag.FlagSet, dbPath *string, args []string, out io.Writer) error {
	format := fs.String("format", "csv", "csv (one row per snapshot and event) or json (every frame as pushed to the dashboard)")
	pos, err := parse(fs, args, 1, "recording ID")
	if err != nil {
		return err
	}
	id, err := recordingID(pos[0])
	if err != nil {
		return err
	}
	if *format != "csv" && *format != "json" {
		return usagef("--format %q: want csv or json", *format)
	}
	db, err := openDB(ctx, *dbPath, false)
	if err != nil {
		return err
	}
	defer db.Close()
	rec, err := db.Recording(ctx, id)
	if err != nil {
		return err
	}
	frames, err := db.RecordingFrames(ctx, id)
	if err != nil {
		return err
	}
	if *format == "json" {
		return recording.WriteJSON(out, rec, frames)
	}
	return recording.WriteCSV(out, frames)
}

func recordingsDelete(ctx context.Context, fs *flag.FlagSet, dbPath *string, args []string, out io.Writer) error {
	force := fs.Bool("force", false, "delete it even while a running kvlens is still recording it")
	pos, err := parse(fs, args, 1, "recording ID")
	if err != nil {
		return err
	}
	id, err := recordingID(pos[0])
	if err != nil {
		return err
	}
	db, err := openDB(ctx, *dbPath, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if !*force {
		// The running kvlens would go on appending to a recording that is
		// gone, and fail every flush; the dashboard refuses this too.
		rec, err := db.Recording(ctx, id)
		if err != nil {
			return err
		}
		if recording.Live(rec, time.Now()) {
			return fmt.Errorf("recording %d is still being recorded by a running kvlens: stop it first, or pass --force", id)
		}
	}
	if err := db.DeleteRecording(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted recording %d\n", id)
	return nil
}
