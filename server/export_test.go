package server

// SpecError is specError, for the tests of package server_test.
var SpecError = specError
