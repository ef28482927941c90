package clientsdk

// WorkIDPreimage exposes the bytes WorkID hashes to the tests.
var WorkIDPreimage = workIDPreimage
