package limits

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

func TestLimitDescribesItselfAsTheModelReadsIt(t *testing.T) {
	tests := []struct {
		cfg      Config
		describe string
		scope    string
	}{
		{Config{Rate: "1/10s"}, "1 call per 10s", "this client"},
		{Config{Rate: "10/s"}, "10 calls per 1s", "this client"},
		{Config{Rate: "600/1m", Methods: []string{"tools/list"}}, "600 requests per 1m", "this client"},
		{Config{Rate: "1/1h", Methods: []string{"ping"}}, "1 request per 1h", "this client"},
		{Config{Rate: "5/1500ms", Key: "{http.mcp.tool}"}, "5 calls per 1.5s", "this tool"},
		{Config{Rate: "5/90m", Key: "{http.mcp.session_id}"}, "5 calls per 90m", "this session"},
		{Config{Rate: "5/s", Key: "{http.request.remote.host}"}, "5 calls per 1s", "this client"},
		{Config{Rate: "5/s", Key: "global"}, "5 calls per 1s", "all clients"},
		{Config{Rate: "5/s", Key: "{http.request.header.Authorization}"}, "5 calls per 1s", "this key"},
	}
	for _, tt := range tests {
		t.Run(tt.describe+"/"+tt.scope, func(t *testing.T) {
			l, err := configure("describe", &tt.cfg, zap.NewNop())
			require.NoError(t, err)
			assert.Equal(t, tt.describe, l.describe())
			assert.Equal(t, tt.scope, l.scope)
		})
	}
}
