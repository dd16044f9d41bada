-- Segments the worker left out of its standalone pass on purpose (`--standalone-segments
-- candidates`: no clause category's scorer finds the segment likely from its contextual
-- embedding). Labels score their contextual embedding, as for any segment without a
-- standalone one; `docpipe labels` and `eval` fill in only the segments not marked here.
ALTER TABLE segments ADD COLUMN standalone_skipped boolean NOT NULL DEFAULT false;
