package jsonrpc

// Known is what a Skimmer knows of a message it has not read to its end:
// enough, once the message has grown past what a reader may hold, to tell
// whether it can still be a response to a given request.
type Known struct {
	// Method: the message has a method member, which makes it a request or
	// a notification, never a response.
	Method bool
	// ID is the id's value as written, once read whole and valid (nil until
	// then, or when it is longer than the skimmer keeps).
	ID []byte
	// Uncertain: what was read cannot be read one way (a member given
	// twice, or under another letter case, or a broken structure).
	Uncertain bool
}

// Known is what the skimmer knows of the message so far.
func (k *Skimmer) Known() Known {
	kn := Known{Method: k.hasMethod, Uncertain: k.ambiguous || k.err != nil}
	if k.hasID && !k.id.on && !k.id.long {
		s := scanner{b: k.id.b}
		if err := s.value(1); err == nil && s.i == len(s.b) {
			kn.ID = k.id.b
		}
	}
	return kn
}
