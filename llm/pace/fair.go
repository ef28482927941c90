package pace

// fairNode is a level of the fair queue: stride scheduling among its
// children (a child's pass grows by 1/weight each time it is picked; the
// active child of least pass goes next), and at the leaves a FIFO. A child
// that becomes active starts at its parent's virtual time, so waiting
// earns no credit: no child starves and none bursts after a pause.
type fairNode struct {
	weight   float64
	pass     float64
	vtime    float64 // the pass of the last child picked
	waiting  int     // waiters under this node
	children map[string]*fairNode
	fifo     []*waiter // leaves only
	view     bool      // a clone: its FIFOs share the original's arrays
}

func newFairNode(weight float64) *fairNode {
	return &fairNode{weight: weight, children: map[string]*fairNode{}}
}

// push adds w under the path of (key, weight) levels.
func (n *fairNode) push(path []fairKey, w *waiter) {
	n.waiting++
	if len(path) == 0 {
		n.fifo = append(n.fifo, w)
		return
	}
	c, ok := n.children[path[0].name]
	if !ok {
		c = newFairNode(path[0].weight)
		n.children[path[0].name] = c
	}
	if c.waiting == 0 {
		c.pass = max(c.pass, n.vtime)
	}
	c.push(path[1:], w)
}

// pop removes and returns the next waiter; nil when none waits.
func (n *fairNode) pop() *waiter {
	if n.waiting == 0 {
		return nil
	}
	n.waiting--
	if len(n.children) == 0 {
		w := n.fifo[0]
		if !n.view {
			n.fifo[0] = nil
		}
		n.fifo = n.fifo[1:]
		return w
	}
	var best *fairNode
	var bestName string
	for name, c := range n.children {
		if c.waiting > 0 && (best == nil || c.pass < best.pass || (c.pass == best.pass && (c.weight > best.weight || (c.weight == best.weight && name < bestName)))) {
			best, bestName = c, name
		}
	}
	n.vtime = best.pass
	best.pass += 1 / best.weight
	w := best.pop()
	if best.waiting == 0 && len(best.children) == 0 {
		delete(n.children, bestName) // an idle leaf keeps nothing
	}
	return w
}

// remove takes w out (a waiter that gave up); false when it is not there.
func (n *fairNode) remove(path []fairKey, w *waiter) bool {
	if len(path) == 0 {
		for i, x := range n.fifo {
			if x == w {
				n.fifo = append(n.fifo[:i:i], n.fifo[i+1:]...)
				n.waiting--
				return true
			}
		}
		return false
	}
	c, ok := n.children[path[0].name]
	if !ok || !c.remove(path[1:], w) {
		return false
	}
	n.waiting--
	if c.waiting == 0 && len(c.children) == 0 {
		delete(n.children, path[0].name)
	}
	return true
}

// clone copies the node for a look ahead. The FIFOs' arrays are shared: a
// clone's pop only moves its own slice header.
func (n *fairNode) clone() *fairNode {
	c := &fairNode{weight: n.weight, pass: n.pass, vtime: n.vtime, waiting: n.waiting, children: make(map[string]*fairNode, len(n.children)), fifo: n.fifo, view: true}
	for name, ch := range n.children {
		c.children[name] = ch.clone()
	}
	return c
}

// ahead returns the next n waiters in the order pop would give them,
// leaving the queue as it is.
func (n *fairNode) ahead(count int) []*waiter {
	c := n.clone()
	out := make([]*waiter, 0, min(count, n.waiting))
	for range count {
		w := c.pop()
		if w == nil {
			break
		}
		out = append(out, w)
	}
	return out
}

// fairKey is one level of a waiter's path: its class, tenant and group.
type fairKey struct {
	name   string
	weight float64
}
