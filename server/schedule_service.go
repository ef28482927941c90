package server

// validateScheduleRequest checks ScheduleService's requests.
func (s *jobService) validateScheduleRequest(req any, v *violations) {}
