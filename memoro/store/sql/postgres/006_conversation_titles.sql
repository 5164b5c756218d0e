-- Imported conversations keep the title they had (ChatGPT, Claude.ai…).
ALTER TABLE conversations ADD COLUMN title text;
