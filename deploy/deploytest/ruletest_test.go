package deploytest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v2"
)

// This file runs rule unit tests written in promtool's format ("Unit testing for rules" in Prometheus' docs) with
// Prometheus' own packages, the way promtool test rules does (cmd/promtool/unittest.go): the input series are
// loaded into an in-memory storage (promqltest's LazyLoader, expanding notation included), the rule files are
// loaded by a rules.Manager, every group is evaluated at each evaluation interval, and the firing alerts are
// compared, labels and annotations, with each alert_rule_test case at its eval_time. Building these packages
// takes a fraction of building promtool, whose command pulls in every service discovery's cloud SDK.
//
// It reads the part of the format postbox-rules.test.yaml uses, strictly: rule_files, evaluation_interval, and
// tests with name, interval, input_series and alert_rule_test. A field it does not read (promql_expr_test,
// group_eval_order, external_labels...) fails the read instead of being ignored; the file stays one promtool
// runs as well.

// ruleTestFile is a rule unit test file.
type ruleTestFile struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval model.Duration  `yaml:"evaluation_interval"`
	Tests              []ruleTestGroup `yaml:"tests"`

	dir string // the file's directory, which rule_files are relative to
}

// ruleTestGroup is one test: input series, and the alerts expected at given times.
type ruleTestGroup struct {
	Name           string          `yaml:"name"`
	Interval       model.Duration  `yaml:"interval"`
	InputSeries    []inputSeries   `yaml:"input_series"`
	AlertRuleTests []alertTestCase `yaml:"alert_rule_test"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// alertTestCase lists every alert of a name expected to be firing at EvalTime; none means the alert is quiet.
type alertTestCase struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []expAlert     `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

func readRuleTests(t *testing.T) *ruleTestFile {
	t.Helper()
	path := filepath.Join(root, rulesTestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleTestFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v (the deploy tests read rule_files, evaluation_interval, and tests with name, interval, "+
			"input_series and alert_rule_test)", rulesTestFile, err)
	}
	if len(f.RuleFiles) == 0 || len(f.Tests) == 0 {
		t.Fatalf("%s: no rule_files or no tests", rulesTestFile)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	f.dir = filepath.Dir(path)
	for i, tg := range f.Tests {
		if tg.Name == "" {
			t.Fatalf("%s: test %d has no name", rulesTestFile, i+1)
		}
		for _, a := range tg.AlertRuleTests {
			if a.Alertname == "" {
				t.Fatalf("%s: test %q: an alert_rule_test case at eval_time %s has no alertname", rulesTestFile, tg.Name, a.EvalTime)
			}
		}
	}
	return &f
}

// run runs one test group and returns its failures, each naming the test, the alert and the time.
func (f *ruleTestFile) run(tg ruleTestGroup) []error {
	interval := tg.Interval
	if interval == 0 {
		interval = f.EvaluationInterval
	}
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", interval)
	for _, s := range tg.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	p := parser.NewParser(parser.Options{})
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: p,
	})
	if err != nil {
		return []error{fmt.Errorf("test %q: input_series: %w", tg.Name, err)}
	}
	defer suite.Close()
	evalInterval := time.Duration(f.EvaluationInterval)
	suite.SubqueryInterval = evalInterval

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       slog.New(slog.DiscardHandler),
		Parser:       p,
	})
	files := make([]string, len(f.RuleFiles))
	for i, rf := range f.RuleFiles {
		files[i] = filepath.Join(f.dir, rf)
	}
	groupsByName, errs := m.LoadGroups(time.Duration(interval), labels.EmptyLabels(), "", nil, false, files...)
	if errs != nil {
		return errs
	}
	var groups []*rules.Group
	for _, g := range groupsByName {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *rules.Group) int { return strings.Compare(a.Name(), b.Name()) })
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // as after a restart whose state was restored: "for" counts from the first evaluation
			}
		}
	}

	cases := slices.Clone(tg.AlertRuleTests)
	slices.SortStableFunc(cases, func(a, b alertTestCase) int { return int(a.EvalTime - b.EvalTime) })
	var last model.Duration
	if len(cases) > 0 {
		last = cases[len(cases)-1].EvalTime
	}

	var failures []error
	start := time.Unix(0, 0).UTC()
	for ts := start; !ts.After(start.Add(time.Duration(last))); ts = ts.Add(evalInterval) {
		var evalErrs []error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErrs = append(evalErrs, err)
				return
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						evalErrs = append(evalErrs, fmt.Errorf("test %q: rule %s at %s: %w", tg.Name, r.Name(), ts.Sub(start), r.LastError()))
					}
				}
			}
		})
		if evalErrs != nil {
			return append(failures, evalErrs...)
		}
		// A case is checked against the last evaluation at or before its eval_time.
		for len(cases) > 0 && time.Duration(cases[0].EvalTime) < ts.Add(evalInterval).Sub(start) {
			c := cases[0]
			cases = cases[1:]
			want := c.expected()
			got := firing(groups, c.Alertname)
			if !slices.Equal(want, got) {
				failures = append(failures, fmt.Errorf("test %q: alert %s at %s:\n  want firing: %s\n  got firing:  %s",
					tg.Name, c.Alertname, c.EvalTime, listOrNone(want), listOrNone(got)))
			}
		}
	}
	return failures
}

// expected returns the alerts a case expects, each as its labels (alertname added) and annotations, sorted.
func (c alertTestCase) expected() []string {
	var out []string
	for _, a := range c.ExpAlerts {
		ls := labels.FromMap(a.ExpLabels)
		ls = labels.NewBuilder(ls).Set(labels.AlertName, c.Alertname).Labels()
		out = append(out, alertString(ls, labels.FromMap(a.ExpAnnotations)))
	}
	slices.Sort(out)
	return out
}

// firing returns the alerts of a name firing in the groups after their last evaluation, as expected does.
func firing(groups []*rules.Group, name string) []string {
	var out []string
	for _, g := range groups {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok || ar.Name() != name {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					out = append(out, alertString(a.Labels, a.Annotations))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func alertString(ls, annotations labels.Labels) string {
	return ls.String() + " annotations " + annotations.String()
}

func listOrNone(alerts []string) string {
	if len(alerts) == 0 {
		return "none"
	}
	return "\n    " + strings.Join(alerts, "\n    ")
}
