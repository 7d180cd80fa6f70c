package testenv

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// DocSQL returns the body of the ```sql code block that follows the comment <!-- marker --> in the Markdown file
// at path, so that a test runs the SQL a document shows. Its errors name path and marker.
func DocSQL(path, marker string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	doc := string(raw)
	i := strings.Index(doc, "<!-- "+marker+" -->")
	if i < 0 {
		return "", fmt.Errorf("%s has no %q block", path, marker)
	}
	rest := doc[i:]
	start := strings.Index(rest, "```sql\n")
	if start < 0 {
		return "", fmt.Errorf("%s: no ```sql block after %q", path, marker)
	}
	body := rest[start+len("```sql\n"):]
	end := strings.Index(body, "```")
	if end < 0 {
		return "", fmt.Errorf("%s: the ```sql block after %q does not end", path, marker)
	}
	return body[:end], nil
}

// documentedRole matches the roles the grants of docs/SECURITY.md create, one a job.
var documentedRole = regexp.MustCompile(`\bpostbox_(migrator|app|relay|maintainer)\b`)

// GrantRole is the name, in the run whose names end in suffix, of the documented role of job (migrator, app,
// relay or maintainer), so that runs sharing a server do not collide.
func GrantRole(job, suffix string) string { return "pbt_" + job + "_" + suffix }

// RenameGrantRoles replaces the documented role names in sql (postbox_migrator, postbox_app, postbox_relay,
// postbox_maintainer) with GrantRole's.
func RenameGrantRoles(sql, suffix string) string {
	return documentedRole.ReplaceAllString(sql, GrantRole("${1}", suffix))
}
