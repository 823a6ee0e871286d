package main

import (
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// render prints v as -o asks: json and yaml (the same keys as the API's
// JSON) for scripts, table (the table func) for people.
func (e *env) render(format string, v any, table func() error) error {
	switch format {
	case "json":
		return e.printJSON(v)
	case "yaml":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return err
		}
		out, err := yaml.Marshal(generic)
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(out)
		return err
	case "table", "":
		return table()
	}
	return fmt.Errorf("-o %s: expected table, json or yaml", format)
}
