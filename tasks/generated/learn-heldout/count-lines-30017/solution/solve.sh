#!/bin/bash
grep -cx island /app/notes.log > /app/result.txt
