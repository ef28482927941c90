// Package jobspec turns a job request into what the store keeps: it checks
// a SubmitJobRequest against SubmitJob's field rules and makes its
// store.JobSubmitParams (dedup key, fingerprint, pipeline version, a new
// id). Its errors are plain Go errors (*Error, a list of *FieldError;
// errors.Is(err, ErrInvalid)); it knows no transport. The server maps them
// to INVALID_ARGUMENT with BadRequest field violations; the scheduler calls
// it for a slot's job. See docs/architecture.md, "Packages and the
// direction of dependencies".
package jobspec
