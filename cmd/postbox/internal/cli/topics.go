package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"
)

var topicsCommand = &command{
	name:     "topics",
	synopsis: "pause|resume TOPIC --db URL [--actor NAME] | list --db URL [--json]",
	summary:  "pause or resume the publishing of a topic, or list the paused topics",
	help: `
'topics pause TOPIC' makes relays hold back the topic's messages: they stay pending, and enqueuing goes on as
usual. Relays read the paused topics every few seconds (the relay's --paused-refresh), so a pause takes effect
within that time; a batch already claimed is still published. 'topics resume TOPIC' lets relays publish them
again, oldest first. 'topics list' shows the paused topics, when and by whom each was paused. Pause and resume
are logged and recorded with --actor, by default the USER environment variable, else the account running
postbox.`,
	examples: []string{
		"postbox topics pause orders --db postgres://localhost/app --actor alice",
		"postbox topics resume orders --db postgres://localhost/app",
		"postbox topics list --db sqlite:app.db --json",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var actor string
		var asJSON bool
		addDBFlags(f, &o)
		f.String(&actor, "actor", "", "", "NAME", "who pauses or resumes, for the log and the paused list (default: $USER, else the account running postbox)")
		f.Bool(&asJSON, "json", "", "print JSON")
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) == 0 {
				return usageErrorf("say what to do: topics pause TOPIC, topics resume TOPIC or topics list")
			}
			action := args[0]
			switch action {
			case "list":
				if len(args) != 1 {
					return usageErrorf("topics list takes no topic")
				}
			case "pause", "resume":
				if len(args) != 2 || args[1] == "" {
					return usageErrorf("name the topic: topics %s TOPIC", action)
				}
				if err := checkFlagText("topic", args[1]); err != nil {
					return err
				}
			default:
				return usageErrorf("unknown topics action %q: use pause, resume or list", printable(action))
			}
			if actor == "" {
				actor = defaultActor(rt)
			}
			if err := checkFlagText("--actor", actor); err != nil {
				return err
			}
			db, err := o.openMigrated(ctx, rt, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			switch action {
			case "list":
				paused, err := db.PausedTopics(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]pausedJSON, len(paused))
					for i, p := range paused {
						out[i] = pausedJSON{Topic: p.Topic, PausedAt: p.PausedAt.UTC(), PausedBy: p.PausedBy}
					}
					return writeJSON(rt.stdout, out)
				}
				if len(paused) == 0 {
					fmt.Fprintln(rt.stdout, "no paused topics")
					return nil
				}
				tw := tabwriter.NewWriter(rt.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TOPIC\tPAUSED AT\tPAUSED BY")
				for _, p := range paused {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(p.Topic), p.PausedAt.UTC().Format(time.RFC3339), printable(p.PausedBy))
				}
				return tw.Flush()
			case "pause":
				changed, err := db.PauseTopic(ctx, args[1], actor)
				if err != nil {
					return invalidAsUsage(err)
				}
				return reportTopic(rt, asJSON, args[1], "paused", changed)
			default:
				changed, err := db.ResumeTopic(ctx, args[1], actor)
				if err != nil {
					return invalidAsUsage(err)
				}
				return reportTopic(rt, asJSON, args[1], "resumed", changed)
			}
		}
	},
}

type pausedJSON struct {
	Topic    string    `json:"topic"`
	PausedAt time.Time `json:"paused_at"`
	PausedBy string    `json:"paused_by,omitempty"`
}

// reportTopic prints the outcome of a pause or resume: whether it changed anything.
func reportTopic(rt *runtime, asJSON bool, topic, verb string, changed bool) error {
	if asJSON {
		return writeJSON(rt.stdout, map[string]any{"topic": topic, verb: true, "changed": changed})
	}
	if changed {
		fmt.Fprintf(rt.stdout, "%s %s\n", verb, printable(topic))
	} else {
		fmt.Fprintf(rt.stdout, "%s was already %s\n", printable(topic), verb)
	}
	return nil
}
