package sse

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEventsAreWrittenAsClientsReadThem(t *testing.T) {
	assert.Equal(t, "event: message\ndata: {\"a\":1}\n\n", string(AppendMessage(nil, nil, false, []byte(`{"a":1}`))))
	assert.Equal(t, "id: e7\nevent: message\ndata: {\"a\":\ndata: 1}\n\n", string(AppendMessage(nil, []byte("e7"), true, []byte("{\"a\":\n1}"))),
		"each line of the data on a data line of its own")
	assert.Equal(t, "id: \nevent: message\ndata: \n\n", string(AppendMessage(nil, nil, true, nil)), "an empty id is an id")
	assert.Equal(t, "event: other\n\n", string(AppendEvent(nil, "other")))
}
