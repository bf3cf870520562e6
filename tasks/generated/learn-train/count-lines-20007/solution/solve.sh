#!/bin/bash
grep -cx candle /app/notes.lst > /app/answer.txt
