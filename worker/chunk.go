package worker

import "unicode"

// chunkText splits text into chunks of at most size runes, each starting
// overlap runes before the previous one ended, so a sentence cut at a border
// is seen whole by one of the two calls. A chunk ends at the last white space
// in its final quarter when there is one, so words are not cut. The result
// depends only on its inputs.
func chunkText(text string, size, overlap int) []string {
	runes := []rune(text)
	if len(runes) <= size {
		return []string{text}
	}
	var chunks []string
	start := 0
	for start < len(runes) {
		end := min(start+size, len(runes))
		if end < len(runes) {
			for i := end - 1; i > start+size*3/4; i-- {
				if unicode.IsSpace(runes[i]) {
					end = i + 1
					break
				}
			}
		}
		chunks = append(chunks, string(runes[start:end]))
		if end == len(runes) {
			break
		}
		start = max(end-overlap, start+1)
	}
	return chunks
}
