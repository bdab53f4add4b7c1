package durable

// OnEndWritten sets o's test hook: f(id) is called as soon as an end that
// no run of instance id records is written (endRelayed: a child that failed
// before its first run started, one cancelled while no run carried it).
func OnEndWritten(o *Options, f func(id string)) { o.endWritten = f }
