package durable

// OnEndWritten sets o's test hook: f(id) is called as soon as child id's
// end is written where no run of it is open (a child that failed before
// its first run started, one cancelled while no run carried it).
func OnEndWritten(o *Options, f func(id string)) { o.endWritten = f }
