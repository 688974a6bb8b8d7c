package toolschema

import (
	"encoding/json"
	"strings"
	"testing"

	gojsonschema "github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The validator was chosen over github.com/google/jsonschema-go, the Go
// SDK's, on what the model is told (docs/configuration.md, "Arguments
// checked at the edge"). These tests hold the reasons: what jsonschema-go reports for the
// same schema and arguments. Run the comparison of speed with
//
//	go test -run '^$' -bench Validators -benchmem ./toolschema/

// resolveWithGoSDKValidator compiles invoice with jsonschema-go.
func resolveWithGoSDKValidator(t testing.TB) *gojsonschema.Resolved {
	t.Helper()
	var s gojsonschema.Schema
	require.NoError(t, json.Unmarshal([]byte(invoice), &s))
	rs, err := s.Resolve(nil)
	require.NoError(t, err)
	return rs
}

func decodeArgs(t testing.TB, args string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(args), &v))
	return v
}

func TestTheGoSDKValidatorStopsAtTheFirstFailureAndPassesFormats(t *testing.T) {
	ours, err := Compile([]byte(invoice))
	require.NoError(t, err)
	theirs := resolveWithGoSDKValidator(t)

	// Two failures: both are worded here; jsonschema-go's error names one.
	twoWrong := `{"status":3}`
	assert.Len(t, mustCheck(t, ours, []byte(twoWrong)), 2)
	err = theirs.Validate(decodeArgs(t, twoWrong))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), `"id"`, "jsonschema-go stops at the first failure: %v", err)

	// A format is asserted here; jsonschema-go lets it pass.
	badEmail := `{"id":"not-an-email","status":"draft"}`
	require.Len(t, mustCheck(t, ours, []byte(badEmail)), 1)
	assert.NoError(t, theirs.Validate(decodeArgs(t, badEmail)), "jsonschema-go does not assert formats")
}

// The same 1 KiB of arguments, valid (what nearly every call is), and
// breaking several keywords (where this package words every failure and
// jsonschema-go stops at the first).
var validatorArgs = map[string]string{
	"valid":   `{"id":"a@example.com","status":"paid","limit":50,"code":"ABC","tags":["x","y"],"lines":[{"sku":"a","qty":1},{"sku":"b","qty":2}],"note":"` + strings.Repeat("Pay within thirty days. ", 34) + `"}`,
	"invalid": `{"id":"a@example.com","status":"late","limit":0,"lines":[{"sku":"x","qty":2},{"skew":"y"}],"tags":["a","a"],"note":"` + strings.Repeat("Pay within thirty days. ", 34) + `"}`,
}

func BenchmarkValidators(b *testing.B) {
	ours, err := Compile([]byte(invoice))
	require.NoError(b, err)
	theirs := resolveWithGoSDKValidator(b)
	for _, name := range []string{"valid", "invalid"} {
		args := []byte(validatorArgs[name])
		want := name == "valid"
		b.Run(name+"/santhosh-tekuri", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if valid := mustCheck(b, ours, args) == nil; valid != want {
					b.Fatalf("valid: %v", valid)
				}
			}
		})
		b.Run(name+"/google-jsonschema-go", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(args, &v); err != nil {
					b.Fatal(err)
				}
				if valid := theirs.Validate(v) == nil; valid != want {
					b.Fatalf("valid: %v", valid)
				}
			}
		})
	}
}
