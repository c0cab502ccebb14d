package facade

// OptionsForTest are the options s was built with: tests build a second facade from them
// with other dependencies (a kube-apiserver that fails, for instance).
func (s *Server) OptionsForTest() Options { return s.opts }
