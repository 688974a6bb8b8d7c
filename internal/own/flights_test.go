package own

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAReopenIsJoinedWhileItRunsAndForAWhileAfter(t *testing.T) {
	now := time.Unix(1000, 0)
	f := NewFlights()
	f.now = func() time.Time { return now }
	fl, lead := f.join("a")
	require.True(t, lead)
	joined, lead := f.join("a")
	require.False(t, lead)
	require.Same(t, fl, joined)
	f.finish(fl, "new", nil, nil)
	<-joined.done
	assert.Equal(t, "new", joined.ID)

	now = now.Add(reopenRemembered - time.Second)
	_, lead = f.join("a")
	assert.False(t, lead, "a request of the old session that meets its 404 after the reopen is sent under the new one")
	now = now.Add(time.Second)
	again, lead := f.join("a")
	assert.True(t, lead, "long after, the session lost again is reopened again")
	f.finish(again, "", nil, errors.New("refused"))
	assert.Len(t, f.m, 1)
	_, lead = f.join("a")
	assert.True(t, lead, "a reopen that failed is no answer for the requests after it")
}

func TestTheReopensANodeRemembersAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	f := NewFlights()
	f.now = func() time.Time { return now }
	for i := range maxReopensHeld + 10 {
		fl, lead := f.join(strconv.Itoa(i))
		require.True(t, lead)
		f.finish(fl, "x", nil, nil)
	}
	assert.Len(t, f.m, maxReopensHeld, "past the bound, a reopen is led and not remembered")
	now = now.Add(reopenRemembered)
	_, lead := f.join("late")
	assert.True(t, lead)
	assert.Len(t, f.m, 1, "those long over are swept once the map is full")

	big := strings.Repeat("s", maxReopenBytes/2+1)
	f.join(big + "1")
	f.join(big + "2")
	assert.LessOrEqual(t, f.bytes, maxReopenBytes)
}
