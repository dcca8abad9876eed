package api

import (
	"embed"
	"io/fs"
	"net/http"
)

// consoleFiles are the console's static assets: index.html, its ES modules
// and stylesheet, and the vendored libraries (console/vendor, refreshed by
// console/vendor.sh; versions and licences in console/NOTICE.md). Nothing
// is fetched from elsewhere at run time.
//
//go:embed console/index.html console/*.js console/*.css console/NOTICE.md console/vendor
var consoleFiles embed.FS

// consoleCSP allows the console's own files and calls to its own origin only.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleHandler serves the console (issue 12) under /console/: a
// single-page app in the browser that signs in with an API key and calls
// /v1 with it, as any client does, so it can show and do exactly what that
// key may. The handler itself needs no key: it serves static files.
func consoleHandler() http.Handler {
	sub, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	files := http.StripPrefix("/console/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache") // revalidate: a new binary's assets show at once
		files.ServeHTTP(w, r)
	})
}
