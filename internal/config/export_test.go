package config

// SectionKeys are the registered top-level keys, for the external tests.
func SectionKeys() []string {
	keys := make([]string, 0, len(sections))
	for k := range sections {
		keys = append(keys, k)
	}
	return keys
}

// KeyList is the list of top-level keys the unknown-key error names.
func KeyList() string { return keyList(sections) }
