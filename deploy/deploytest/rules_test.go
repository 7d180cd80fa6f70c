package deploytest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	rulesFile     = "deploy/prometheus/postbox-rules.yaml"
	rulesTestFile = "deploy/prometheus/postbox-rules.test.yaml"
)

func TestAlertRulesCheck(t *testing.T) {
	run(t, tool(t, "POSTBOX_PROMTOOL"), "check", "rules", rulesFile)
}

func TestAlertRulesUnitTests(t *testing.T) {
	run(t, tool(t, "POSTBOX_PROMTOOL"), "test", "rules", rulesTestFile)
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
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, rulesTestFile, &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
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
}
