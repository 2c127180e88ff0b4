package components

import (
	"bytes"
	"html"

	"github.com/a-h/templ"
	"github.com/yuin/goldmark"
)

// md renders CommonMark. Its default HTML renderer leaves raw HTML out
// ("<!-- raw HTML omitted -->") and drops links to javascript: and similar
// URLs, so a worker's answer cannot put markup or script on the page.
var md = goldmark.New()

// markdown shows a model's answer, or a starter passage, as the Markdown it
// is: shown as plain text, an answer read "**allocatable**" and "1." lists
// ran together. Text goldmark cannot render is shown escaped, as it came.
func markdown(s string) templ.Component {
	var b bytes.Buffer
	if err := md.Convert([]byte(s), &b); err != nil {
		return templ.Raw("<p>" + html.EscapeString(s) + "</p>")
	}
	return templ.Raw(b.String())
}
