package ir

func init() {
	opCases[OpCompare] = func(c *opCtx) {
		c.b.Op(OpCompare, []*Value{c.x, c.row}, Attrs{"cmp": StringAttr("ge")})
	}
	opCases[OpWhere] = func(c *opCtx) {
		cond := c.b.Op(OpCompare, []*Value{c.x, c.row}, Attrs{"cmp": StringAttr("lt")})
		c.b.Op(OpWhere, []*Value{cond, c.x, c.row}, nil)
	}
}
