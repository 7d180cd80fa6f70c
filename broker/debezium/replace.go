package debezium

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// expandJava applies a replacement in the syntax of Java's Matcher.appendReplacement, which Kafka's RegexRouter
// uses: \c is the character c, $n a numbered group (taking further digits while the group exists), ${name} a
// named group; a group that did not take part adds nothing. With match nil it only checks the template against
// re's groups.
func expandJava(tmpl string, re *regexp.Regexp, match []int, src string) (string, error) {
	var b strings.Builder
	group := func(i int) {
		if match != nil && match[2*i] >= 0 {
			b.WriteString(src[match[2*i]:match[2*i+1]])
		}
	}
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		switch c {
		case '\\':
			i++
			if i == len(tmpl) {
				return "", errors.New("a backslash at the end escapes nothing")
			}
			b.WriteByte(tmpl[i])
		case '$':
			i++
			if i == len(tmpl) {
				return "", errors.New("a $ at the end names no group (write \\$ for a dollar sign)")
			}
			if tmpl[i] == '{' {
				end := strings.IndexByte(tmpl[i:], '}')
				if end < 0 {
					return "", errors.New("${ is not closed by }")
				}
				name := tmpl[i+1 : i+end]
				n := re.SubexpIndex(name)
				if n < 0 {
					return "", fmt.Errorf("route.topic.regex has no group named %q", name)
				}
				group(n)
				i += end
				continue
			}
			if tmpl[i] < '0' || tmpl[i] > '9' {
				return "", fmt.Errorf("$%c is not a group reference (write $1 or ${name}, or \\$ for a dollar sign)", tmpl[i])
			}
			n := int(tmpl[i] - '0')
			for i+1 < len(tmpl) && tmpl[i+1] >= '0' && tmpl[i+1] <= '9' {
				next := n*10 + int(tmpl[i+1]-'0')
				if next > re.NumSubexp() {
					break
				}
				n = next
				i++
			}
			if n > re.NumSubexp() {
				return "", fmt.Errorf("route.topic.regex has no group %d", n)
			}
			group(n)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
