-- request_headers / body_preview / response_headers: the request as sent
-- (headers without the signature, the body's first 512 bytes) and the
-- response's headers, for the console's message page (issue 12). Text of
-- "Name: value" lines (audit.FormatHeaders), at most 2 KiB each, credentials
-- redacted. Rows stored before this migration read ''. One column per
-- statement: 18.16 has no ADD COLUMN IF NOT EXISTS (a repeat fails
-- "already exists", which Migrate counts as applied).
ALTER TABLE {db}.attempts ADD COLUMN request_headers String DEFAULT ''
;
ALTER TABLE {db}.attempts ADD COLUMN body_preview String DEFAULT ''
;
ALTER TABLE {db}.attempts ADD COLUMN response_headers String DEFAULT ''
