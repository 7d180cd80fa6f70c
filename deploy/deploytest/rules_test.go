package deploytest

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

const (
	rulesFile     = "deploy/prometheus/postbox-rules.yaml"
	rulesTestFile = "deploy/prometheus/postbox-rules.test.yaml"
)

// The rules file passes what promtool check rules checks: Prometheus' own parser reads it with no unknown field,
// every expression and annotation template parses, and no two rules share a name and labels.
func TestAlertRulesCheck(t *testing.T) {
	rgs, errs := rulefmt.ParseFile(filepath.Join(root, rulesFile), false, model.UTF8Validation,
		parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if rgs == nil {
		return
	}
	seen := map[string]bool{}
	n := 0
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			n++
			key := r.Alert + r.Record + fmt.Sprint(mergedLabels(g.Labels, r.Labels))
			if seen[key] {
				t.Errorf("%s: group %s: rule %s%s is defined twice with the same labels", rulesFile, g.Name, r.Alert, r.Record)
			}
			seen[key] = true
		}
	}
	if n == 0 {
		t.Errorf("%s defines no rule", rulesFile)
	}
}

func mergedLabels(group, rule map[string]string) []string {
	var ls []string
	for k, v := range group {
		if _, ok := rule[k]; !ok {
			ls = append(ls, k+"="+v)
		}
	}
	for k, v := range rule {
		ls = append(ls, k+"="+v)
	}
	slices.Sort(ls)
	return ls
}

// Each test group of postbox-rules.test.yaml, run as promtool test rules runs it (see ruletest_test.go).
func TestAlertRulesUnitTests(t *testing.T) {
	f := readRuleTests(t)
	for _, tg := range f.Tests {
		t.Run(tg.Name, func(t *testing.T) {
			for _, err := range f.run(tg) {
				t.Error(err)
			}
		})
	}
}

// ruleGroups is the part of a Prometheus rules file these tests read.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert"`
			Record string `json:"record"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) ruleGroups {
	t.Helper()
	var g ruleGroups
	readYAML(t, rulesFile, &g)
	return g
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Every alert has a unit test in which it fires and one in which it stays quiet.
func TestEveryAlertIsUnitTested(t *testing.T) {
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tg := range readRuleTests(t).Tests {
		for _, a := range tg.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] {
				t.Errorf("%s: no test in %s expects alert %s to fire", rulesFile, rulesTestFile, r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("%s: no test in %s expects alert %s to stay quiet", rulesFile, rulesTestFile, r.Alert)
			}
		}
	}
	for name := range fires {
		if !slices.Contains(alerts, name) {
			t.Errorf("%s tests alert %s, which %s does not define", rulesTestFile, name, rulesFile)
		}
	}
	for name := range quiet {
		if !slices.Contains(alerts, name) {
			t.Errorf("%s tests alert %s, which %s does not define", rulesTestFile, name, rulesFile)
		}
	}
}

// The runner fails a test whose expectation is wrong: each case of the file, turned into its opposite (an alert
// expected quiet where it fires, or expected to fire where it is quiet), must be reported.
func TestRuleRunnerReportsWrongExpectations(t *testing.T) {
	f := readRuleTests(t)
	for _, tg := range f.Tests {
		for i, a := range tg.AlertRuleTests {
			wrong := tg
			wrong.AlertRuleTests = []alertTestCase{a}
			if len(a.ExpAlerts) > 0 {
				wrong.AlertRuleTests[0].ExpAlerts = nil
			} else {
				wrong.AlertRuleTests[0].ExpAlerts = []expAlert{{ExpLabels: map[string]string{"severity": "none"}}}
			}
			errs := f.run(wrong)
			if len(errs) == 0 {
				t.Errorf("%s: test %q, case %d (%s at %s): the opposite expectation passed too", rulesTestFile, tg.Name, i+1,
					a.Alertname, a.EvalTime)
				continue
			}
			if !strings.Contains(errs[0].Error(), a.Alertname) {
				t.Errorf("the runner's error does not name alert %s: %v", a.Alertname, errs[0])
			}
		}
	}
}
