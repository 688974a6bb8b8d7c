package promreg

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAConfigsLabelsAreBoundedAndTheirSeriesGoWithTheLastConfigThatLabelsThem(t *testing.T) {
	var dropped []string
	s := NewSharedLabels(func(v string) { dropped = append(dropped, v) })
	old := s.ForConfig(2)
	assert.Equal(t, "a", old.Of("a"))
	assert.Equal(t, "b", old.Of("b"))
	assert.Equal(t, Other, old.Of("c"), "bounded")

	reloaded := s.ForConfig(2)
	assert.Equal(t, "b", reloaded.Of("b"))
	assert.Equal(t, "c", reloaded.Of("c"), "a new config starts anew")

	old.Release()
	old.Release()
	assert.Equal(t, []string{"a"}, dropped, "b is still labelled by the new config")
	assert.Equal(t, "b", old.Of("b"), "a request of the old config still labels what another does")
	assert.Equal(t, Other, old.Of("a"))

	reloaded.Release()
	assert.ElementsMatch(t, []string{"a", "b", "c"}, dropped)
	assert.Empty(t, s.uses)
}

func TestConfigLabelsAreSafeForConcurrentUse(t *testing.T) {
	s := NewSharedLabels(func(string) {})
	c := s.ForConfig(10)
	done := make(chan struct{})
	for i := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := range 100 {
				c.Of(fmt.Sprint(i, j%20))
			}
		}()
	}
	for range 4 {
		<-done
	}
	c.Release()
	assert.Empty(t, s.uses)
}
