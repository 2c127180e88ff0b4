// Package getjson reads a JSON document over HTTP, as the probes read a
// running kvlens's /api/state.
package getjson

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Get decodes the JSON document at url into v; a status other than 200 is
// an error.
func Get(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
