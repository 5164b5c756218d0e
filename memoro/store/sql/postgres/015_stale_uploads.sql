-- An upload still arriving after a day was cut off by a server that stopped
-- mid-way. Its rows are one user's, behind a forced policy, so no worker
-- could find them: members of memoro_worker may now see and delete exactly
-- those rows of any user ('uploading' for a day or more, and their parts),
-- and nothing else of anyone's imports.
CREATE POLICY stale_uploads ON imports FOR SELECT
    USING ((SELECT memoro_is_worker()) AND status = 'uploading'
           AND created_at < now() - interval '1 day');
CREATE POLICY drop_stale_uploads ON imports FOR DELETE
    USING ((SELECT memoro_is_worker()) AND status = 'uploading'
           AND created_at < now() - interval '1 day');
CREATE POLICY stale_upload_parts ON import_parts FOR SELECT
    USING ((SELECT memoro_is_worker()) AND import_id IN (SELECT id FROM imports));
CREATE POLICY drop_stale_upload_parts ON import_parts FOR DELETE
    USING ((SELECT memoro_is_worker()) AND import_id IN (SELECT id FROM imports));
