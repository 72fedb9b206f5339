package gpu

// embeddingGroups lays out ids for embedding_bwd: the u distinct ids in
// order of first appearance, then u+1 offsets into the positions, then
// the positions of each id in increasing order (len(ids) of them).
func embeddingGroups(ids []int32) (grp []int32, u int) {
	group := make(map[int32]int32, len(ids))
	var distinct, count []int32
	for _, id := range ids {
		g, ok := group[id]
		if !ok {
			g = int32(len(distinct))
			group[id] = g
			distinct = append(distinct, id)
			count = append(count, 0)
		}
		count[g]++
	}
	u = len(distinct)
	grp = make([]int32, 2*u+1+len(ids))
	copy(grp, distinct)
	off, pos := grp[u:2*u+1], grp[2*u+1:]
	for g, c := range count {
		off[g+1] = off[g] + c
	}
	next := append([]int32(nil), off[:u]...)
	for t, id := range ids {
		g := group[id]
		pos[next[g]] = int32(t)
		next[g]++
	}
	return grp, u
}
