#!/bin/bash
wc -l < /app/events.log > /app/answer.txt
