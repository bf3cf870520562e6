#!/bin/bash
grep -cx orbit /app/notes.lst > /app/answer.txt
